package main

import "syscall"

// adviseHuge asks for transparent huge pages (MADV_HUGEPAGE).
func adviseHuge(b []byte) { syscall.Madvise(b, 14) }
