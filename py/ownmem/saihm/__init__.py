"""SAIHM (custodial profile): holder identity, cells, receipts, contracts."""
