package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"sigs.k8s.io/yaml"

	"github.com/spotwise/spotwise/auth"
)

// clientConfig is the CLI's config file: which server to talk to, with
// which token. The server writes it at start (unless --no-client-config)
// so that `make run` and then `spotwise submit ...` work with nothing
// set.
type clientConfig struct {
	Server string `json:"server"`
	Token  string `json:"token"`
}

// clientConfigPath is $XDG_CONFIG_HOME/spotwise/config.yaml, or
// ~/.config/spotwise/config.yaml.
func clientConfigPath() (string, error) {
	dir := os.Getenv("XDG_CONFIG_HOME")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("no $XDG_CONFIG_HOME and no home directory: %w", err)
		}
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, "spotwise", "config.yaml"), nil
}

// loadClientConfig reads the config file; a missing file is an empty
// config.
func loadClientConfig() (clientConfig, string, error) {
	var c clientConfig
	path, err := clientConfigPath()
	if err != nil {
		return c, "", err
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return c, path, nil
	}
	if err != nil {
		return c, path, err
	}
	if err := yaml.UnmarshalStrict(b, &c); err != nil {
		return c, path, fmt.Errorf("%s: %w", path, err)
	}
	return c, path, nil
}

// writeClientConfig saves a server address and token for the CLI (mode
// 0600: the token is a secret).
func writeClientConfig(c clientConfig) (string, error) {
	path, err := clientConfigPath()
	if err != nil {
		return "", err
	}
	b, err := yaml.Marshal(c)
	if err != nil {
		return "", err
	}
	header := "# written by `spotwise server`; the CLI reads it after --server/--token and SPOTWISE_SERVER/SPOTWISE_TOKEN\n"
	return path, auth.WriteSecretFile(path, append([]byte(header), b...))
}
