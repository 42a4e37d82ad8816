"""`python -m convo`: the `convo` command."""

from convo import main

main()
