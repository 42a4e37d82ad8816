"""The application shell: what it takes to run the store as a program.

Settings from the environment, where the database is (a URL or the
embedded server) and waiting for it, engines, the migrations runner, API
keys, and the wiring that makes a storage and repositories from settings.
The HTTP service (`api`) and the command line (`convo`) stand on it; the
library (`store`) never imports it.
"""
