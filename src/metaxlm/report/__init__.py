"""Reports: tables and plots people look at."""
