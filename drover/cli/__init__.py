"""The command line: click commands, one declaration each (main.py is the group), and their presentation."""
