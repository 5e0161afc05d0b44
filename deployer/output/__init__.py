"""Output rate limiting (OUTPUT ... EVERY ...): what a limiter lets through and when, shared by the
engines as deployer.patterns is (docs/language.md, "Output rate limiting")."""
