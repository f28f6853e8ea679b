"""`python -m drover`: the same entry point as the `drover` program."""
from drover.cli.launch import main

main()
