// Package checkpoint keeps jobs' checkpoints: the files a workload wrote into
// its checkpoint directory, stored under a job and a step with a manifest that
// names every file with its size and SHA-256.
//
// A Store is a local directory (the default), an S3 bucket or an Azure Blob
// container. Every backend uses one layout,
//
//	<prefix>/<job>/<step, 20 digits>/<files...>
//	<prefix>/<job>/<step, 20 digits>/MANIFEST.json
//
// and one rule: the manifest is written last, after every file was uploaded
// and verified against what the store reports it holds, and only manifests
// are read to find checkpoints. A partial or failed upload is therefore
// invisible, and never replaces the last good checkpoint. Files are streamed
// and hashed on the way, never held in memory whole; a restore verifies every
// file again and reports a mismatch as ErrCorrupt, so RestoreLatestGood can
// fall back to an older checkpoint.
//
// The layout and the verification are written once (store.go, save.go,
// restore.go) over the objects interface, the few operations each backend
// implements (local.go, s3.go, azblob.go).
//
// It knows nothing about NATS, the agent protocol or scheduling: it does not
// decide when to checkpoint, how many checkpoints to keep, or what a lost
// checkpoint costs. One writer per job is assumed (the agent of the job's
// current attempt); concurrent Saves of different steps are safe.
package checkpoint
