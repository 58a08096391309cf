// Package atomicfile writes output files atomically: through a temporary
// file in the destination's folder, synced and renamed into place, so a
// failed or interrupted write leaves the old file (or none), never a
// partial one. The CLI's traces and profiles, the benchmark reports, their
// plots and exported datasets all go through it. A symbolic link stays
// (the file it leads to is replaced); the process's standard output and
// error (/dev/stdout) are written on their open descriptors; a device or
// a named pipe is written in place, since renaming over it would replace
// the device node or the pipe.
package atomicfile
