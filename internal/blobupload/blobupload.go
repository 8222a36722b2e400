// Package blobupload writes one object of a gocloud.dev/blob bucket
// through Bucket.Upload fed by a pipe, instead of through blob.Writer's
// Write: every object weir writes to a bucket (checkpoint objects through
// checkpoint/bucket, the Parquet sink's part files) goes through it.
//
// Why not blob.Writer: gocloud.dev v0.47's azureblob writer panics (a nil
// pointer dereference in its Close) when an upload fed by Write fails or
// is cancelled: its upload goroutine sets the pipe it reads to nil after
// an error, and Close then closes that nil pipe. A failed conditional
// write (IfNotExist: two writers of one checkpoint, a fenced zombie), a
// network error past the SDK's retries or an aborted part file would
// bring the whole process down. The driver's Upload path has no pipe of
// its own, and every driver supports it (drivers without an Uploader copy
// the reader into their writer), so this package provides the pipe.
//
// Invariants:
//
//	U1. After Close returned nil the object exists, whole; after Abort it
//	    was not written (the upload's context is cancelled before its
//	    reader fails, so no driver commits what it had read). A bucket
//	    write is atomic: a reader sees the whole object or none.
//	U2. Write never blocks forever: once the upload has ended (failed), the
//	    pipe is closed with its error and Write returns it.
package blobupload

import (
	"context"
	"errors"
	"io"

	"gocloud.dev/blob"
)

// ErrAborted is the error of an upload ended by Abort.
var ErrAborted = errors.New("blobupload: aborted")

// Writer is one object being uploaded. Write and Close (or Abort) are
// called by one goroutine; the upload runs on a goroutine of its own that
// reads what Write hands it.
type Writer struct {
	pw     *io.PipeWriter
	cancel context.CancelFunc
	done   chan struct{} // closed when the upload has returned
	err    error         // the upload's result; read after done
}

// New starts uploading key to b with opts (opts.ContentType is required,
// as by Bucket.Upload). The caller must call Close or Abort.
func New(b *blob.Bucket, key string, opts *blob.WriterOptions) *Writer {
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	w := &Writer{pw: pw, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		w.err = b.Upload(ctx, key, pr, opts)
		// U2: a Write waiting on a failed upload returns its error.
		err := w.err
		if err == nil {
			err = io.ErrClosedPipe
		}
		pr.CloseWithError(err)
	}()
	return w
}

// Write hands p to the upload; p is not retained after it returns.
func (w *Writer) Write(p []byte) (int, error) {
	n, err := w.pw.Write(p)
	if err != nil {
		<-w.done
		if w.err != nil {
			err = w.err
		}
	}
	return n, err
}

// Close ends the object and waits for the upload: nil means it is
// written whole (U1).
func (w *Writer) Close() error {
	w.pw.Close()
	<-w.done
	w.cancel()
	return w.err
}

// Abort discards the object: the upload is cancelled and waited for.
func (w *Writer) Abort() {
	w.cancel()
	w.pw.CloseWithError(ErrAborted)
	<-w.done
}
