package broker

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/weirproject/weir/internal/fsync"
)

// Commits remembered across an unclean shutdown.
//
// kfake keeps its producer ids in pids.log, a log of framed JSON entries
// it replays at start. When a transaction ends with EndTxn version 5
// (KIP-890, what franz-go sends), kfake appends an "endtx" entry (the
// epoch, and whether it committed) and then an "init" entry for the
// producer's next epoch, without the commit flag. Replaying that "init"
// resets the producer's last outcome to "aborted". A commit sent again
// with the transaction's producer id and epoch, which Kafka answers with
// success (it is how a client retries, and how weir's exactly-once sink
// commits the transactions of the checkpoint it restores), is then refused
// with INVALID_TXN_STATE after every kill -9 of the broker, although the
// transaction's records are committed in the log.
//
// repairPIDsLog, run before kfake reads the directory, gives each such
// "init" entry the outcome of the "endtx" right before it (same producer
// id, epoch one below). A clean Close rewrites the log from memory, where
// the outcome was kept, so only a directory left by a kill needs it; it
// is cheap enough to run at every start.

// pidsLogName is kfake's producer-id log in a data directory.
const pidsLogName = "pids.log"

// kfake's framing: a little-endian uint32 length (of what follows the
// CRC), a little-endian CRC-32C of the version and the JSON, a
// little-endian uint16 version, the JSON.
const pidsEntryHeader = 10

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

type pidsEntry struct {
	version uint16
	data    []byte
}

// readPIDsEntries splits raw into kfake's framed entries; rest is what
// follows the last valid one (a torn write, which kfake drops).
func readPIDsEntries(raw []byte) (entries []pidsEntry, rest []byte) {
	pos := 0
	for pos+pidsEntryHeader <= len(raw) {
		n := int(binary.LittleEndian.Uint32(raw[pos:]))
		if n < 2 || pos+8+n > len(raw) {
			break
		}
		body := raw[pos+8 : pos+8+n]
		if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(raw[pos+4:]) {
			break
		}
		entries = append(entries, pidsEntry{version: binary.LittleEndian.Uint16(body), data: body[2:]})
		pos += 8 + n
	}
	return entries, raw[pos:]
}

func appendPIDsEntry(b []byte, e pidsEntry) []byte {
	var h [pidsEntryHeader]byte
	binary.LittleEndian.PutUint32(h[0:], uint32(2+len(e.data)))
	binary.LittleEndian.PutUint16(h[8:], e.version)
	crc := crc32.Update(crc32.Checksum(h[8:10], castagnoli), castagnoli, e.data)
	binary.LittleEndian.PutUint32(h[4:], crc)
	return append(append(b, h[:]...), e.data...)
}

// repairPIDsLog rewrites dir's pids.log with the commit flag restored on
// the "init" entries that follow an "endtx" (above) and reports how many
// it changed. A directory without the log is left alone.
func repairPIDsLog(dir string) (int, error) {
	path := filepath.Join(dir, pidsLogName)
	raw, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	entries, rest := readPIDsEntries(raw)
	type head struct {
		Type   string `json:"type"`
		PID    int64  `json:"pid"`
		Epoch  int16  `json:"epoch"`
		TxID   string `json:"txid"`
		Commit *bool  `json:"commit"`
	}
	type ended struct {
		epoch  int16
		commit bool
	}
	last := map[int64]*ended{} // the producer's previous entry, when an endtx with an outcome
	fixed := 0
	for i, e := range entries {
		var h head
		if json.Unmarshal(e.data, &h) != nil {
			continue // kfake skips it too
		}
		prev := last[h.PID]
		delete(last, h.PID)
		switch {
		case h.Type == "endtx" && h.Commit != nil:
			last[h.PID] = &ended{h.Epoch, *h.Commit}
		case h.Type == "init" && h.Commit == nil && h.TxID != "" && prev != nil && prev.epoch+1 == h.Epoch && prev.commit:
			var m map[string]json.RawMessage
			if err := json.Unmarshal(e.data, &m); err != nil {
				continue
			}
			m["commit"] = json.RawMessage("true")
			data, err := json.Marshal(m)
			if err != nil {
				return 0, err
			}
			entries[i].data = data
			fixed++
		}
	}
	if fixed == 0 {
		return 0, nil
	}
	b := make([]byte, 0, len(raw)+fixed*16)
	for _, e := range entries {
		b = appendPIDsEntry(b, e)
	}
	if err := fsync.WriteFile(path, append(b, rest...), 0o644); err != nil {
		return 0, fmt.Errorf("rewrite %s: %w", pidsLogName, err)
	}
	return fixed, nil
}
