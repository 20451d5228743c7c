// Package volume is the Volume controller: it keeps numberOfReplicas
// replicas, places each with the pure placement policy, asks the chosen
// disk's ledger for the space only after the placement is persisted, and on
// rejection releases the request and places the replica again elsewhere.
// Expansions raise every replica's request and take effect only when every
// ledger has granted them.
package volume
