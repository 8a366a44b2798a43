"""Moving memories in and out: ``items`` turns an import item into a file's fields and
path (and an export back), ``importing`` is the vault's part of an import (duplicates,
ids already taken, links), ``formats`` names the other servers' formats and
``importers/`` reads each of them.
"""
