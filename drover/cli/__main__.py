"""`python -m drover.cli`: the same entry point as the `drover` program."""
from drover.cli.main import main

main()
