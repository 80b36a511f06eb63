package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// clockTicks is the kernel's USER_HZ, 100 on every Linux this runs on.
const clockTicks = 100

// cpuTime reads a process's CPU time (user and system) from /proc/PID/stat.
func cpuTime(pid int) (time.Duration, error) {
	_, cpu, err := procStat(pid)

	return cpu, err
}

// procStat reads a process's command name and CPU time (user and system) from /proc/PID/stat.
func procStat(pid int) (string, time.Duration, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", 0, fmt.Errorf("failed to read the CPU time of process %d: %w", pid, err)
	}

	// "PID (COMMAND) STATE ...": the command name may contain spaces and parentheses, the fields start
	// after its last closing parenthesis.
	s := string(stat)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')

	if open < 0 || end < open {
		return "", 0, fmt.Errorf("malformed /proc/%d/stat", pid)
	}

	fields := strings.Fields(s[end+1:])

	if len(fields) < 13 {
		return "", 0, fmt.Errorf("short /proc/%d/stat", pid)
	}

	utime, err := strconv.ParseInt(fields[11], 10, 64)
	if err != nil {
		return "", 0, fmt.Errorf("failed to parse utime: %w", err)
	}

	stime, err := strconv.ParseInt(fields[12], 10, 64)
	if err != nil {
		return "", 0, fmt.Errorf("failed to parse stime: %w", err)
	}

	return s[open+1 : end], time.Duration(utime+stime) * time.Second / clockTicks, nil
}

// tcpEstablished is the state of an established connection in /proc/net/tcp.
const tcpEstablished = "01"

// connsTo counts a process's established TCP connections to the given remote ports: its socket inodes
// (/proc/PID/fd) matched against its network namespace's connections (/proc/PID/net/tcp and tcp6).
func connsTo(pid int, ports map[int]bool) (int, error) {
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return 0, fmt.Errorf("failed to list the host's descriptors: %w", err)
	}

	inodes := map[string]bool{}

	for _, fd := range fds {
		link, err := os.Readlink(filepath.Join(fmt.Sprintf("/proc/%d/fd", pid), fd.Name()))
		if err != nil {
			continue // closed meanwhile
		}

		if inode, ok := strings.CutPrefix(link, "socket:["); ok {
			inodes[strings.TrimSuffix(inode, "]")] = true
		}
	}

	count := 0

	for _, table := range []string{"tcp", "tcp6"} {
		n, err := countTCP(fmt.Sprintf("/proc/%d/net/%s", pid, table), inodes, ports)
		if err != nil {
			return 0, err
		}

		count += n
	}

	return count, nil
}

// countTCP counts the established connections of a /proc/net/tcp table whose socket is one of inodes and
// whose remote port is one of ports.
func countTCP(path string, inodes map[string]bool, ports map[int]bool) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("failed to read the host's connections: %w", err)
	}

	defer f.Close() //nolint:errcheck // Read only.

	count := 0
	scanner := bufio.NewScanner(f)

	for scanner.Scan() {
		if remotePort, ok := establishedSocket(scanner.Text(), inodes); ok && ports[remotePort] {
			count++
		}
	}

	if err = scanner.Err(); err != nil {
		return 0, fmt.Errorf("failed to read %s: %w", path, err)
	}

	return count, nil
}

// establishedSocket parses one line of /proc/net/tcp ("sl local rem st ... uid timeout inode ..."): the
// remote port of an established connection whose inode is one of inodes.
func establishedSocket(line string, inodes map[string]bool) (int, bool) {
	fields := strings.Fields(line)
	if len(fields) < 10 || fields[3] != tcpEstablished || !inodes[fields[9]] {
		return 0, false
	}

	_, portHex, ok := strings.Cut(fields[2], ":")
	if !ok {
		return 0, false
	}

	port, err := strconv.ParseUint(portHex, 16, 16)
	if err != nil {
		return 0, false
	}

	return int(port), true
}
