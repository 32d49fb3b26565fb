"""The dashboard's inputs: the control table and its records, the control panel, input checks, the
validated scenario and the saved scenarios."""
