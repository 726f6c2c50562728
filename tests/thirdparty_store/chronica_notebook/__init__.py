"""A minimal third-party Chronica backend, tested as written: the example of the documentation's
"Write your own backend" page (``docs/how-to/write-a-backend.md``)."""
