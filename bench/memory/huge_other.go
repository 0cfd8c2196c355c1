//go:build !linux

package main

func adviseHuge([]byte) {}
