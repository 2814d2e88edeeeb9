"""The test suite, one folder per package: env (the core), db, api (domains and lib), client,
system (whole processes)."""
