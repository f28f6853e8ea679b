"""`python -m drover`: the same entry point as the `drover` program."""
from .launch import main

main()
