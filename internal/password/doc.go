// Package password hashes and checks secrets (passwords of people, secrets
// of confidential clients) with argon2id, stored as PHC strings:
//
//	$argon2id$v=19$m=19456,t=2,p=1$<salt>$<hash>
//
// with unpadded standard base64 for salt and hash.
//
// Invariants:
//   - A Hasher holds no global state: each node builds its own with New and
//     passes it where it is needed. Its semaphore bounds how many derivations
//     run at once (each costs Params.Memory KiB), so a burst of sign-ins
//     queues instead of exhausting memory; a waiting caller gives up when its
//     context ends. Every derivation holds a slot: Hash, Verify of every
//     scheme, and Decoy.
//   - Verify reads the parameters from the stored string, so raising the
//     cost later never breaks existing hashes. Parameters outside sane bounds
//     are rejected as malformed rather than run (a corrupted or hostile
//     string must not make a node allocate gigabytes), and so is an argon2id
//     above the Hasher's caps (MaxArgon2MemoryFactor times its own memory,
//     MaxArgon2Time passes, MaxArgon2Threads lanes), which Check refuses
//     at import as bcrypt and PBKDF2 costs beyond theirs.
//   - A check with no hash to compare (no such person) spends one Decoy,
//     the cost of a wrong password.
//   - Comparison is constant-time.
package password
