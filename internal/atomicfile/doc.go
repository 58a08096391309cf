// Package atomicfile writes output files atomically: through a temporary
// file in the destination's folder, synced and renamed into place, so a
// failed or interrupted write leaves the old file (or none), never a
// partial one. The CLI's traces and profiles, the benchmark reports, their
// plots and exported datasets all go through it. A symbolic link
// (/dev/stdout), a device or a named pipe is written through in place
// instead: renaming over it would replace the link or the device node.
package atomicfile
