package cluster

// TransportConfig secures node-to-node traffic (raft and forwarded writes).
type TransportConfig struct {
	// ClusterKey is the 32-byte shared secret; nil means plaintext, which
	// only a single node on loopback may use.
	ClusterKey []byte
}
