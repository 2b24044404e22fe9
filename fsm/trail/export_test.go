package trail

// Hooks for the tests of package trail_test.
var (
	EncodeBlock = encodeBlock
	DecodeBlock = decodeBlock
)

// SetSealFault makes every seal fail with err (nil: seals work again).
func SetSealFault(err error) {
	if err == nil {
		sealFault = nil
		return
	}
	sealFault = func() error { return err }
}
