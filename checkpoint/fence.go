package checkpoint

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
)

// ErrExists is the error of a write that lost a race: the snapshot's
// manifest (or a fence's epoch) was created by another writer first. The
// snapshot is not complete for the loser, which must not report it
// complete (nor commit what it pre-committed for it).
var ErrExists = errors.New("checkpoint: already exists")

// ErrFenced is the error of a Storage whose Fence a newer owner of the
// checkpoint base has superseded (see Fence): the writer must stop working
// on the base's job, and commit nothing of its checkpoints.
var ErrFenced = errors.New("checkpoint: fenced: a newer owner claimed the checkpoint location")

// FenceDirName is the directory under a checkpoint base that holds the
// fence's objects (see Fence).
const FenceDirName = "_fence"

// Fence is one owner's claim on a checkpoint base shared by programs that
// may run the same job one after the other, and wrongly at once (a clustered
// task whose old owner lost its group session but still runs: a zombie).
// ClaimLatest makes one; set it as Storage.Fence for the owner's writes.
//
// The design. A zombie must neither complete a checkpoint that its task's
// new owner does not restore, nor commit anything of one. A conditional
// manifest alone cannot ensure that (the zombie may take the next
// checkpoint number first, and then pause for any time), so the new owner
// claims the base, in three steps, all before its first transaction:
//
//	F1. it creates BASE/_fence/<E>.epoch for the next epoch E, only if
//	    absent (ExclusivePublisher): epochs are totally ordered, each
//	    owned by one claimant;
//	F2. it then picks R, the newest valid complete checkpoint (below);
//	F3. it records R in BASE/_fence/<E>.from and restores from R.
//
// A writer with a fence (Storage.Write) stamps its manifests with its epoch
// and publishes each only if absent; it checks for a newer epoch before
// writing, and again after the manifest is published, and returns ErrFenced
// if there is one: the checkpoint is then not complete for it, it commits
// nothing, and it stops. Readers (List, Latest, Retain) count a complete
// checkpoint M with epoch e as void when an epoch E > e recorded a restore
// point R < M: E's owner restored from an older state, so M's output is
// not (and must never be) committed.
//
// Why this fences a zombie Z against its task's new owner N (epoch E): if
// Z's check after publishing M saw no epoch E, that check preceded F1,
// which precedes N's pick (F2): N sees M and restores M or newer, and
// commits M's pre-committed transactions itself (restore commits them;
// committing twice is harmless). If the check saw E, Z commits nothing; M
// was published either before F2 (N may restore it, as above; this is why
// the zombie does not delete or abort it) or after (M > R: void as soon as
// F3 is written, and F3 precedes N's first transaction, which is what
// fences Z at Kafka). Z's next write fails its first check, so Z publishes
// at most one manifest after F1. N's own checkpoints carry epoch E and
// are not voided by E; a later owner's epoch voids those of N that it did
// not see, in turn.
//
// Residual: an owner N' (epoch E2 > E) that picks its R2 after Z's void M
// was published but before N's F3 sees M as valid; if N' restores M and
// then dies before completing a checkpoint, the next owner sees M void.
// It takes two hand-overs of one task within the few milliseconds between
// an owner's F2 and F3, during a zombie's publish.
//
// Guarantees hold where the Store publishes exclusively: a directory on a
// file system with hard links (local, NFS), S3 (conditional writes,
// If-None-Match), Google Cloud Storage and Azure Blob Storage (preconditions,
// through gocloud.dev/blob). Elsewhere the existence check and the write
// are two steps, which two writers can both pass (docs/checkpoints.md).
type Fence struct {
	store Store
	key   string // the base's key in store
	base  string // the base, for errors
	epoch int64
}

// Epoch returns the fence's epoch (1 for the first owner of a base).
func (f *Fence) Epoch() int64 { return f.epoch }

// epochOf returns f's epoch, 0 for no fence.
func (f *Fence) epochOf() int64 {
	if f == nil {
		return 0
	}
	return f.epoch
}

// Check returns an error matching ErrFenced if a newer owner claimed the
// base since f was made; nil for a nil Fence.
func (f *Fence) Check() error {
	if f == nil {
		return nil
	}
	epochs, _, err := readFence(f.store, f.key)
	if err != nil {
		return err
	}
	if len(epochs) > 0 && epochs[len(epochs)-1] > f.epoch {
		return fmt.Errorf("%w: %s is owned by epoch %d, this writer's is %d", ErrFenced, f.base, epochs[len(epochs)-1], f.epoch)
	}
	return nil
}

// ClaimLatest claims checkpoint base for a new owner (F1-F3 of Fence) and
// returns the fence and the newest valid complete checkpoint under base
// to restore: its location and id, or "" and 0 when there is none. The
// owner restores from that checkpoint (or starts fresh) with the returned
// fence as Storage.Fence, before its first transaction.
func (st Storage) ClaimLatest(base string) (*Fence, string, int64, error) {
	f, err := st.claimEpoch(base)
	if err != nil {
		return nil, "", 0, err
	}
	dir, id, err := f.pick()
	if err != nil {
		return nil, "", 0, err
	}
	return f, dir, id, nil
}

// claimEpoch is F1: it creates the next epoch's object, only if absent. A
// claimant that loses the race for an epoch tries the next one; each loss
// means another claimant won, so the bound is generous.
func (st Storage) claimEpoch(base string) (*Fence, error) {
	store, key, err := st.open(base)
	if err != nil {
		return nil, err
	}
	for range 64 {
		epochs, _, err := readFence(store, key)
		if err != nil {
			return nil, err
		}
		e := int64(1)
		if len(epochs) > 0 {
			e = epochs[len(epochs)-1] + 1
		}
		err = publishExclusive(store, fenceKey(key, e, "epoch"), []byte(`{"token":"`+newToken()+`"}`))
		if err == nil {
			return &Fence{store: store, key: key, base: base, epoch: e}, nil
		}
		if !errors.Is(err, ErrExists) {
			return nil, fmt.Errorf("checkpoint: claim %s: %w", base, err)
		}
	}
	return nil, fmt.Errorf("checkpoint: claim %s: lost the race for a new epoch 64 times; is something else claiming it in a loop?", base)
}

// pick is F2 and F3: it picks the newest valid complete checkpoint and
// records it as the epoch's restore point.
func (f *Fence) pick() (string, int64, error) {
	ids, err := listComplete(f.store, f.key)
	if err != nil {
		return "", 0, err
	}
	var from int64
	if len(ids) > 0 {
		from = ids[len(ids)-1]
	}
	if err := f.store.Publish(fenceKey(f.key, f.epoch, "from"), []byte(strconv.FormatInt(from, 10))); err != nil {
		return "", 0, fmt.Errorf("checkpoint: claim %s: %w", f.base, err)
	}
	if from == 0 {
		return "", 0, nil
	}
	return Dir(f.base, from), from, nil
}

// fenceKey is the key of epoch e's object of kind ("epoch" or "from").
func fenceKey(key string, e int64, kind string) string {
	return keyJoin(key, FenceDirName, fmt.Sprintf("%012d.%s", e, kind))
}

// readFence returns the claimed epochs under base key, ascending, and the
// restore point each recorded (F3; an epoch whose claimant died before
// recording one voids nothing).
func readFence(store Store, key string) ([]int64, map[int64]int64, error) {
	entries, err := store.List(keyJoin(key, FenceDirName))
	if err != nil {
		return nil, nil, err
	}
	var epochs []int64
	froms := map[int64]int64{}
	for _, e := range entries {
		name, kind, ok := strings.Cut(e.Name, ".")
		if !ok || e.IsDir {
			continue
		}
		ep, err := strconv.ParseInt(name, 10, 64)
		if err != nil {
			continue
		}
		switch kind {
		case "epoch":
			epochs = append(epochs, ep)
		case "from":
			data, err := readAll(store, fenceKey(key, ep, "from"))
			if err != nil {
				if errors.Is(err, os.ErrNotExist) {
					continue
				}
				return nil, nil, fmt.Errorf("checkpoint: read the fence of %s: %w", key, err)
			}
			r, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
			if err != nil {
				return nil, nil, fmt.Errorf("checkpoint: %s is corrupt: %q", fenceKey(key, ep, "from"), data)
			}
			froms[ep] = r
		}
	}
	// List returns names in no particular order on every store.
	slices.Sort(epochs)
	return epochs, froms, nil
}

// dropVoid removes from ids (complete checkpoints under base key,
// ascending) those that the fence voids: checkpoint M with epoch e is void
// when an epoch E > e recorded a restore point R < M (see Fence).
func dropVoid(store Store, key string, ids []int64) ([]int64, error) {
	_, froms, err := readFence(store, key)
	if err != nil || len(froms) == 0 {
		return ids, err
	}
	minFrom := int64(-1)
	for _, r := range froms {
		if minFrom < 0 || r < minFrom {
			minFrom = r
		}
	}
	out := ids[:0]
	for _, id := range ids {
		if id > minFrom {
			e, err := manifestEpoch(store, keyJoin(key, dirName(id), MetadataFile))
			if errors.Is(err, os.ErrNotExist) {
				continue // retired meanwhile
			}
			if err != nil {
				return nil, err
			}
			void := false
			for E, r := range froms {
				if E > e && r < id {
					void = true
					break
				}
			}
			if void {
				continue
			}
		}
		out = append(out, id)
	}
	return out, nil
}

// manifestEpoch returns the epoch of the manifest at key (0: written
// without a fence).
func manifestEpoch(store Store, key string) (int64, error) {
	data, err := readAll(store, key)
	if err != nil {
		return 0, fmt.Errorf("checkpoint: read %s: %w", key, err)
	}
	var m struct {
		Epoch int64 `json:"epoch"`
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return 0, fmt.Errorf("checkpoint: %s is corrupt: %w", key, err)
	}
	return m.Epoch, nil
}
