// Package kek wraps secrets at rest (signing keys, TOTP secrets, the browser
// key) under the operator's key-encryption key before they are proposed to
// raft, so the raft log, the bbolt file and snapshots hold only ciphertext.
//
// STUB: the API is fixed; the implementation is being written.
package kek

// KEK is a key-encryption key. A nil *KEK is valid and seals nothing: the
// record is stored in the clear with a marker, so a provider started
// without --kek-file still works and a later KEK can re-wrap it.
type KEK struct{}

// Seal returns sealed bytes bound to aad (what the secret is, e.g.
// "totp/<user id>"), safe to replicate and store.
func (k *KEK) Seal(plaintext []byte, aad string) ([]byte, error) {
	return append([]byte(nil), plaintext...), nil
}

// Open reverses Seal with the same aad.
func (k *KEK) Open(sealed []byte, aad string) ([]byte, error) {
	return append([]byte(nil), sealed...), nil
}
