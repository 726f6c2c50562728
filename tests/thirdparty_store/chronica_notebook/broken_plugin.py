"""A plugin that fails to import, as one with a missing driver would."""

import chronica_frobnicator_driver  # type: ignore[import-not-found]  # noqa: F401 - deliberately missing
