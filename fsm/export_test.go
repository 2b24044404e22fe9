package fsm

import "io"

// PageCopy streams the state file page by page (tx.WriteTo, free pages
// included): what a snapshot was before writeCompact, for the benchmarks.
func (f *FSM) PageCopy(w io.Writer) (int64, error) {
	tx, err := f.db.Begin(false)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback() //nolint:errcheck // a read transaction
	return tx.WriteTo(w)
}
