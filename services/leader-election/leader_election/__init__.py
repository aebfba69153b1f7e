"""leader-election: grants a lease per scope with a strictly increasing fencing token."""
