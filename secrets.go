package main

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// secretVars are the variables that carry credentials.
var secretVars = []string{
	"MANAGED_AGENT_API_KEY",
	"MANAGED_AGENT_ADMIN_KEY",
	"MANAGED_AGENT_DATABASE_URL", // may hold a password
	"MANAGED_AGENT_ANTHROPIC_API_KEY",
	"MANAGED_AGENT_ANTHROPIC_AUTH_TOKEN",
	"MANAGED_AGENT_TEMPORAL_API_KEY",
	"MANAGED_AGENT_EGRESS_PROXY_KEY",
	"MANAGED_AGENT_WEB_SEARCH_API_KEY",
	"MANAGED_AGENT_VAULT_KEYS",      // the keys that decrypt every vault secret
	"MANAGED_AGENT_SANDBOXD_TOKEN",  // sandboxd's commands must not read it from /proc/1/environ
	"MANAGED_AGENT_ENVIRONMENT_KEY", // environment-worker's key to a self-hosted environment
}

// secretsFDVar names the descriptor on which a re-executed process finds its credentials.
const secretsFDVar = "MANAGED_AGENT_INTERNAL_SECRETS_FD"

// maxSecrets keeps the hand-over within a pipe's buffer, so writing it cannot block: 4 KiB,
// the smallest buffer Linux gives a pipe (once a user passes pipe-user-pages-soft).
const maxSecrets = 4 << 10

// hideSecrets keeps credentials out of this process's environment. /proc/PID/environ shows
// the environment a process was started with to every process of the same user — a command
// in the local sandbox too — and neither os.Unsetenv nor anything short of a new exec
// changes it. So when the environment holds credentials, the process re-executes itself
// (same pid, same arguments) without them and hands them over on a pipe; the new image reads
// them from there and returns them. Children inherit the clean environment. If the re-exec
// is impossible the process goes on with its environment as it is, and says so.
func hideSecrets() map[string]string {
	if fdText, ok := os.LookupEnv(secretsFDVar); ok {
		_ = os.Unsetenv(secretsFDVar)
		fd, err := strconv.Atoi(fdText)
		if err != nil {
			// Running without the credentials it was started with would fail later and
			// obscurely (no key, no database): stop now and say why.
			fmt.Fprintf(os.Stderr, "error: %s=%q is not a descriptor; it is set only by managed-agents itself\n", secretsFDVar, fdText)
			os.Exit(1)
		}
		f := os.NewFile(uintptr(fd), "secrets")
		defer f.Close()
		var secrets map[string]string
		if err := json.NewDecoder(f).Decode(&secrets); err != nil {
			fmt.Fprintln(os.Stderr, "error: reading the credentials handed over at start failed:", err)
			os.Exit(1)
		}
		return secrets
	}
	secrets := map[string]string{}
	var env []string
	for _, kv := range os.Environ() {
		name, value, _ := strings.Cut(kv, "=")
		if slices.Contains(secretVars, name) && value != "" {
			secrets[name] = value
			continue
		}
		env = append(env, kv)
	}
	if len(secrets) == 0 {
		return nil
	}
	if err := reexecWithout(env, secrets); err != nil {
		fmt.Fprintln(os.Stderr, "warning: credentials stay visible in /proc/"+strconv.Itoa(os.Getpid())+"/environ:", err)
	}
	return secrets
}

// reexecWithout execs this binary again with env, the credentials on a pipe. It returns only
// on failure.
func reexecWithout(env []string, secrets map[string]string) error {
	b, err := json.Marshal(secrets)
	if err != nil {
		return err
	}
	if len(b) > maxSecrets {
		return fmt.Errorf("the credentials are larger than %d bytes", maxSecrets)
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	_, err = w.Write(b)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	// os.Pipe sets close-on-exec; this end must survive the exec.
	if _, _, errno := syscall.Syscall(syscall.SYS_FCNTL, r.Fd(), syscall.F_SETFD, 0); errno != 0 {
		return errno
	}
	env = append(env, secretsFDVar+"="+strconv.Itoa(int(r.Fd())))
	return syscall.Exec(exe, os.Args, env)
}

// lookupEnv reads a variable: the credentials hideSecrets kept, then the environment.
func lookupEnv(secrets map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		if v, ok := secrets[name]; ok {
			return v, true
		}
		return os.LookupEnv(name)
	}
}
