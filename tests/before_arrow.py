"""The commit before a run's tables became Arrow tables: its pandas-only analysis and writers are the reference the
tests of the Arrow path compare with (``git show BEFORE:<file>``)."""

BEFORE = "03592bc740051980653a3d7d7f9ddfb32e9759b2"
