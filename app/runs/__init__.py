"""Each page's cached runs and the jobs it hands to the server's queue."""
