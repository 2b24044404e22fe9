package node

// WritePair lets the external tests (package node_test) make a TLS pair.
var WritePair = writePair
