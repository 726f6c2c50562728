"""A minimal third-party Chronica backend: the example the README shows, tested as written."""
