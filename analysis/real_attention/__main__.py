"""`python -m real_attention`: the command line."""
from .cli import main

main()
