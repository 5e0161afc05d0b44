"""The deploy service: catalog, lifecycle, the daemon (`cep serve`) and its migrations."""
