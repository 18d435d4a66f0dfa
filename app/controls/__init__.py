"""Each page's URL values and widgets, turned into the sim config the page runs."""
