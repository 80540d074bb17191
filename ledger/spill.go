package ledger

import (
	"fmt"
	"os"
	"sync"

	"go.uber.org/zap"
)

// spillFile is where a View writes its full chunks (SpillTo): one file,
// unlinked as soon as it is made, so it lives as long as the process and
// a process that dies leaves nothing behind.
type spillFile struct {
	f    *os.File
	size int64
	max  int64
	// stopped: the file is full or failed; chunks stay in memory.
	stopped bool
	// at and lens are each chunk's place in the file, by chunk index
	// (lens 0: not spilled).
	at   []int64
	lens []int
}

// spillBuffers are Each's buffers for reading chunks back.
var spillBuffers = sync.Pool{New: func() any { return make([]byte, chunkSize) }}

// SpillTo makes the view write every full chunk of charges to a file in
// dir (the system's temporary directory when empty) and keep only the one
// it is filling in memory, until the file would pass maxBytes; from there
// on, chunks stay in memory, as without it. Call it before Follow or Add.
func (v *View) SpillTo(dir string, maxBytes int64) error {
	if maxBytes <= 0 {
		return nil
	}
	f, err := os.CreateTemp(dir, "spotwise-ledger-*")
	if err != nil {
		return fmt.Errorf("ledger view: %w", err)
	}
	if err := os.Remove(f.Name()); err != nil {
		f.Close()
		return fmt.Errorf("ledger view: %w", err)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.spill = &spillFile{f: f, max: maxBytes}
	return nil
}

// Close releases the view's file; the view must not be used after.
func (v *View) Close() error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.spill == nil {
		return nil
	}
	return v.spill.f.Close()
}

// Spilled is the size of the view's file, and how many chunks of charges
// are in memory.
func (v *View) Spilled() (bytes int64, inMemory int) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	for _, c := range v.chunks {
		if c != nil {
			inMemory++
		}
	}
	if v.spill != nil {
		bytes = v.spill.size
	}
	return bytes, inMemory
}

// spillChunk writes chunk i to the file and drops it from memory, under
// v.mu; on a write error, or past the file's bound, the view stops
// spilling and keeps its chunks in memory.
func (v *View) spillChunk(i int) {
	sp, c := v.spill, v.chunks[i]
	if sp.size+int64(len(c)) > sp.max {
		v.log.Warn("the ledger view's file is full: charges are kept in memory from here on", zap.Int64("max_bytes", sp.max))
		v.stopSpilling()
		return
	}
	if _, err := sp.f.WriteAt(c, sp.size); err != nil {
		v.log.Warn("cannot write the ledger view's file: charges are kept in memory from here on", zap.Error(err))
		v.stopSpilling()
		return
	}
	for len(sp.at) <= i {
		sp.at, sp.lens = append(sp.at, 0), append(sp.lens, 0)
	}
	sp.at[i], sp.lens[i] = sp.size, len(c)
	sp.size += int64(len(c))
	v.chunks[i] = nil
}

// stopSpilling keeps the chunks spilled so far in the file and the rest in
// memory: the file is only read from now on.
func (v *View) stopSpilling() { v.spill.stopped = true }

// read is chunk i as spilled, read into buf.
func (sp *spillFile) read(i int, buf []byte) ([]byte, error) {
	if sp == nil || i >= len(sp.lens) || sp.lens[i] == 0 {
		return nil, fmt.Errorf("chunk %d was not spilled", i)
	}
	if sp.lens[i] > cap(buf) {
		buf = make([]byte, sp.lens[i]) // a chunk of one row larger than chunkSize
	}
	b := buf[:sp.lens[i]]
	if _, err := sp.f.ReadAt(b, sp.at[i]); err != nil {
		return nil, err
	}
	return b, nil
}
