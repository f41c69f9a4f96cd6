"""Faithful fakes of tools this machine does not have (CANN's ``atc``, pyACL's ``acl``).

They follow the documented interfaces written up in docs/atc.md and docs/pyacl.md and are
for tests only; README.md beside this file says what each fakes and how. ``toolkit.py``
installs them all in a toolkit-shaped folder, found the way real CANN is.
"""
