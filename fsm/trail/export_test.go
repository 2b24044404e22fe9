package trail

// Hooks for the tests of package trail_test.
var (
	EncodeBlock = encodeBlock
	DecodeBlock = decodeBlock
)
