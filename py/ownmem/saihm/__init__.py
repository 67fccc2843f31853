"""SAIHM (custodial profile): holder identity, cells, receipts, the log's Merkle functions, the keyless
client checks."""
