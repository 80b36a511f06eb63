// Package config holds the source of the Config resource.
package config

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/cosi-project/runtime/pkg/controller"
	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/fsnotify/fsnotify"
	"go.uber.org/zap"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/configfile"
	"github.com/talos-ccm/talos-ccm/internal/metrics"
	"github.com/talos-ccm/talos-ccm/internal/resources/config"
)

// DefaultPollInterval is how often the config file is read again when no file system notification came:
// the fallback for file systems and mounts that do not notify.
const DefaultPollInterval = 5 * time.Second

// settleDelay lets a burst of file system events (an editor's truncate and write, a ConfigMap update's
// renames) end before the file is read.
const settleDelay = 200 * time.Millisecond

// RejectionReporter is told about a config file change that was rejected.
type RejectionReporter interface {
	ConfigRejected(path string, err error)
}

// ConfigSourceController writes the active Config: the command-line flags merged with the config file
// (explicit flags over the file, the file over the flags' defaults, see configfile.Merge), and keeps it
// current while the file changes.
//
// The file's directory is watched, so that the swap of a ConfigMap mount's ..data symlink is seen as well
// as an edit in place, and the file is also read every PollInterval. A change is applied only when the
// new file is valid; an invalid or unreadable one is logged, counted in
// talos_ccm_config_reload_failures_total and reported to Rejected, once per distinct content, and the
// last good config stays active.
type ConfigSourceController struct {
	// Flags is the config from the command-line flags and their defaults.
	Flags *specs.ConfigSpec
	// Rejected, when set, hears about rejected changes of the file.
	Rejected RejectionReporter
	// Initial is the config file as parsed at start, so that a bad file stops the process before any
	// controller runs; nil means the controller reads Path itself.
	Initial *specs.ConfigSpec
	// Path is the config file; empty means the flags alone.
	Path string
	// Explicit lists the ConfigSpec fields (protobuf names, such as "cluster_name", with a dot into a
	// section: "csr_approval.max_expiration_seconds") that were given as command-line flags: they win over
	// the file.
	Explicit []string
	// PollInterval is how often the file is read without a notification; zero means DefaultPollInterval.
	PollInterval time.Duration

	// good is the last valid config file: what a restart of the controller starts from.
	good *specs.ConfigSpec
}

// Name implements controller.Controller interface.
func (ctrl *ConfigSourceController) Name() string {
	return "config.ConfigSourceController"
}

// Inputs implements controller.Controller interface.
func (ctrl *ConfigSourceController) Inputs() []controller.Input {
	return nil
}

// Outputs implements controller.Controller interface.
func (ctrl *ConfigSourceController) Outputs() []controller.Output {
	return []controller.Output{{Type: config.ConfigType, Kind: controller.OutputExclusive}}
}

// Run implements controller.Controller interface.
func (ctrl *ConfigSourceController) Run(ctx context.Context, r controller.Runtime, logger *zap.Logger) error {
	if ctrl.Path == "" {
		// The flags alone never change: the controller ends once the Config is written (the runtime keeps
		// what it wrote, and runs it no more), and keeps no goroutine for each embedded cluster.
		return ctrl.write(ctx, r, logger, nil)
	}

	if ctrl.good == nil {
		ctrl.good = ctrl.Initial
	}

	if ctrl.good == nil {
		file, err := configfile.Load(ctrl.Path)
		if err != nil {
			// Without a good config nothing can be decided; the runtime runs the controller again.
			return fmt.Errorf("failed to load config file: %w", err)
		}

		ctrl.good = file
	}

	if err := ctrl.write(ctx, r, logger, ctrl.good); err != nil {
		return err
	}

	w := &fileWatch{ctrl: ctrl, logger: logger, lastHash: ctrl.good.GetFileSha256()}

	return w.run(ctx, r)
}

// write makes the merge of the flags and file the active Config.
func (ctrl *ConfigSourceController) write(ctx context.Context, r controller.Runtime, logger *zap.Logger, file *specs.ConfigSpec) error {
	spec := configfile.Merge(ctrl.Flags, ctrl.Explicit, file)

	err := safe.WriterModify(ctx, r, config.NewConfig(config.NamespaceName, config.ActiveID), func(res *config.Config) error {
		res.TypedSpec().Value = spec

		return nil
	})
	if err != nil {
		return fmt.Errorf("failed to write config: %w", err)
	}

	// A config in force is a successful pass: a later failure restarts the controller after the shortest
	// backoff, not after one grown by failures that came before this success.
	r.ResetRestartBackoff()

	logger.Info("config active",
		zap.String("source", spec.GetSource()),
		zap.String("cluster_name", spec.GetClusterName()),
		zap.Int("transformations", len(spec.GetTransformations())),
		zap.String("file_sha256", spec.GetFileSha256()),
	)

	for _, w := range spec.GetWarnings() {
		logger.Warn("config file warning", zap.Int32("line", w.GetLine()), zap.String("rule", w.GetRule()), zap.String("message", w.GetMessage()))
	}

	return nil
}

// fileWatch follows the config file after start.
type fileWatch struct {
	ctrl   *ConfigSourceController
	logger *zap.Logger
	// lastHash is the hash of the last content read, applied or rejected: the same content is never
	// handled twice.
	lastHash string
	// lastReadError is the last failure to read the file, reported once.
	lastReadError string
	// watched are the directories under notification.
	watched map[string]bool
}

func (w *fileWatch) run(ctx context.Context, r controller.Runtime) error {
	poll := w.ctrl.PollInterval
	if poll <= 0 {
		poll = DefaultPollInterval
	}

	ticker := time.NewTicker(poll)
	defer ticker.Stop()

	notify, err := fsnotify.NewWatcher()
	if err != nil {
		w.logger.Warn("config file notifications unavailable, polling only", zap.Duration("interval", poll), zap.Error(err))

		notify = nil
	} else {
		defer notify.Close() //nolint:errcheck
	}

	var events chan fsnotify.Event

	var errs chan error

	if notify != nil {
		events, errs = notify.Events, notify.Errors
		w.updateWatches(notify)
	}

	// The file may have changed between its first read and the watch.
	if err = w.check(ctx, r); err != nil {
		return err
	}

	settle := time.NewTimer(0)
	<-settle.C

	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-events:
			if !ok {
				events = nil

				continue
			}

			w.logger.Debug("config file event", zap.String("name", ev.Name), zap.String("op", ev.Op.String()))
			settle.Reset(settleDelay)

			continue
		case err, ok := <-errs:
			if !ok {
				errs = nil
			} else {
				w.logger.Warn("config file notification error, polling continues", zap.Error(err))
			}

			continue
		case <-settle.C:
		case <-ticker.C:
		}

		if ctx.Err() != nil {
			return nil //nolint:nilerr // Cancelled: not an error.
		}

		if err = w.check(ctx, r); err != nil {
			return err
		}

		if notify != nil {
			w.updateWatches(notify)
		}
	}
}

// updateWatches watches the directory of the path and, when the path is a symlink, the directory of its
// target: the first sees a ConfigMap update (the ..data symlink is replaced next to the file), the
// second an edit of a file linked from elsewhere.
func (w *fileWatch) updateWatches(notify *fsnotify.Watcher) {
	want := map[string]bool{filepath.Dir(w.ctrl.Path): true}

	if target, err := filepath.EvalSymlinks(w.ctrl.Path); err == nil {
		want[filepath.Dir(target)] = true
	}

	for dir := range w.watched {
		if !want[dir] {
			notify.Remove(dir) //nolint:errcheck // It may be gone already.
		}
	}

	for dir := range want {
		if w.watched[dir] {
			continue
		}

		if err := notify.Add(dir); err != nil {
			w.logger.Debug("failed to watch config directory", zap.String("dir", dir), zap.Error(err))

			delete(want, dir)
		}
	}

	w.watched = want
}

// check reads the file and applies it when its content changed and is valid.
func (w *fileWatch) check(ctx context.Context, r controller.Runtime) error {
	path := w.ctrl.Path

	data, err := readFile(path)
	if err != nil {
		if msg := err.Error(); msg != w.lastReadError {
			w.lastReadError = msg
			w.reject(path, err)
		}

		return nil
	}

	w.lastReadError = ""

	sum := sha256.Sum256(data)
	hash := hex.EncodeToString(sum[:])

	if hash == w.lastHash {
		return nil
	}

	w.lastHash = hash

	file, err := configfile.Parse(path, data)
	if err != nil {
		w.reject(path, err)

		return nil
	}

	if err = w.ctrl.write(ctx, r, w.logger, file); err != nil {
		return err
	}

	w.ctrl.good = file

	metrics.ConfigReloads.Inc()
	w.logger.Info("config file reloaded", zap.String("path", path))

	return nil
}

func (w *fileWatch) reject(path string, err error) {
	metrics.ConfigReloadFailures.Inc()

	w.logger.Error("config file change rejected, the last good config stays active", zap.String("path", path), zap.Error(err))

	if w.ctrl.Rejected != nil {
		w.ctrl.Rejected.ConfigRejected(path, err)
	}
}

func readFile(path string) ([]byte, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("failed to read config file: %w", err)
	}

	if info.Size() > configfile.MaxSize {
		return nil, fmt.Errorf("failed to read config file %s: larger than %d bytes", path, configfile.MaxSize)
	}

	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("failed to read config file: %w", err)
	}

	return data, nil
}
