package main

import (
	"fmt"
	"log/slog"
)

// The descriptor budget, as Redis's adjustOpenFilesLimit: at start the
// soft RLIMIT_NOFILE is raised to what maxclients and the node's own
// descriptors need, as far as the hard limit allows; if that is not
// enough, maxclients is lowered to fit, with Redis's messages, so that
// a flood of connections meets "max number of clients reached" rather
// than a full descriptor table (which would fail Raft's, the image's and
// the peers' own opens and accepts).
const (
	// minReservedFDs is Redis's CONFIG_MIN_RESERVED_FDS: standard
	// streams, listeners, the Raft log and stable store, snapshots, the
	// image's base file, logs.
	minReservedFDs = 32
	// imageFilesDefault is Pebble's MaxOpenFiles default; imageFilesMin
	// is the least it keeps open (its file cache holds at least 64
	// tables, plus about 10 files of its own).
	imageFilesDefault = 1000
	imageFilesMin     = 74
)

// nofile reads and sets RLIMIT_NOFILE (rlimit_unix.go); tests fake it.
type nofile interface {
	get() (cur, max uint64, err error)
	set(cur, max uint64) error
}

// fdBudget is what the limit allows: the clients (the effective
// maxclients, and the most CONFIG SET may ask for) and the image's open
// files.
type fdBudget struct {
	maxClients, clientFDs, imageFiles int
}

// reserved is what the node needs besides clients: Redis's reserve,
// and for a replicated node the Raft port's connections (peerConns in,
// as many out: peers open to this node what it opens to them) and the
// image's files.
func reserved(peerConns, imageFiles int, inMemory bool) int {
	if inMemory {
		return minReservedFDs
	}
	return minReservedFDs + 2*peerConns + imageFiles
}

// fitDescriptors raises the soft limit to what maxClients and the
// reserve need (the hard limit too, if the process may), and lowers
// maxClients to what the limit leaves; an error when it leaves none.
func fitDescriptors(lim nofile, maxClients, peerConns int, inMemory bool, log *slog.Logger) (fdBudget, error) {
	want := uint64(maxClients + reserved(peerConns, imageFilesDefault, inMemory))
	cur, hard, err := lim.get()
	if err != nil {
		log.Warn(fmt.Sprintf("Unable to obtain the current NOFILE limit (%s), assuming 1024 and setting the max clients configuration accordingly.", err))
		cur, hard = 1024, 1024
	} else if cur < want {
		old := cur
		if err = lim.set(want, max(want, hard)); err == nil {
			cur = want
			log.Info(fmt.Sprintf("Increased maximum number of open files to %d (it was originally set to %d).", want, old))
		} else if hard > cur && lim.set(hard, hard) == nil {
			cur = hard
		}
	}
	if cur >= want {
		return fdBudget{maxClients: maxClients, clientFDs: min(int(cur)-reserved(peerConns, imageFilesDefault, inMemory), 1<<20), imageFiles: imageFilesDefault}, nil
	}
	image := min(max(int(cur/4), imageFilesMin), imageFilesDefault)
	clients := int(cur) - reserved(peerConns, image, inMemory)
	if clients < 1 {
		return fdBudget{}, fmt.Errorf("Your current 'ulimit -n' of %d is not enough for the server to start. Please increase your open file limit to at least %d. Exiting.", cur, want)
	}
	log.Warn(fmt.Sprintf("You requested maxclients of %d requiring at least %d max file descriptors.", maxClients, want))
	if err != nil {
		log.Warn(fmt.Sprintf("Server can't set maximum open files to %d because of OS error: %s.", want, err))
	}
	log.Warn(fmt.Sprintf("Current maximum open files is %d. maxclients has been reduced to %d to compensate for low ulimit. If you need higher maxclients increase 'ulimit -n'.", cur, clients),
		"reserved_fds", reserved(peerConns, image, inMemory), "max_peer_conns", peerConns, "image_max_open_files", image)
	return fdBudget{maxClients: clients, clientFDs: clients, imageFiles: image}, nil
}
