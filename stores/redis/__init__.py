"""Redis data stores: hashes written by server-side scripts."""
