package asyncio

import (
	"encoding/json"
	"fmt"

	"github.com/weirproject/weir/checkpoint"
	"github.com/weirproject/weir/runtime"
)

// pendingList is the operator-state list holding in-flight inputs.
const pendingList = "asyncio-pending"

// SnapshotState implements runtime.Snapshotter: the inputs whose results
// have not been emitted yet (in input order) are stored, as JSON, so that
// after a restore their calls run again (I10). The upstream position in
// the checkpoint is already past them, so this is what keeps them. The
// final checkpoint of a bounded job (runtime.SnapshotWriter.Final) first
// waits for every call, as EndInput does: nothing follows it, so it covers
// their results, and a restore from it calls nothing again.
func (o *operator[IN, OUT]) SnapshotState(w *runtime.SnapshotWriter) error {
	if w.Final() {
		if err := o.EndInput(); err != nil {
			return err
		}
	}
	recs := o.pending()
	items := make([][]byte, 0, len(recs))
	for _, r := range recs {
		b, err := json.Marshal(r)
		if err != nil {
			return fmt.Errorf("asyncio: in-flight input cannot be stored (its type must encode as JSON): %w", err)
		}
		items = append(items, b)
	}
	w.List(pendingList, checkpoint.EvenSplit, items)
	return nil
}

// restore re-queues the restored in-flight inputs, before any new input.
func (o *operator[IN, OUT]) restore(ctx *runtime.Context) error {
	items, err := ctx.Restored().List(pendingList)
	if err != nil {
		return err
	}
	for _, it := range items {
		var r runtime.Record[IN]
		if err := json.Unmarshal(it, &r); err != nil {
			return fmt.Errorf("asyncio: restore in-flight input: %w", err)
		}
		o.enqueue(r)
	}
	return nil
}
