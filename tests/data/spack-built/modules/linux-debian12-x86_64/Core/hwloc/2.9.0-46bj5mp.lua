-- -*- lua -*-
-- Module file created by spack (https://github.com/spack/spack) on 2026-11-27 20:01:33.920649
--
-- hwloc@2.9.0~cairo~cuda~gl~level_zero~libudev+libxml2~netloc~nvml~opencl+pci~rocm build_system=autotools libs:=shared,static platform=linux os=debian12 target=x86_64/46bj5mp
--

whatis([[Name : hwloc]])
whatis([[Version : 2.9.0]])
whatis([[Target : x86_64]])
whatis([[Short description : The Hardware Locality (hwloc) software project.]])
whatis([[Configure options : unknown, software installed outside of Spack]])

help([[Name   : hwloc]])
help([[Version: 2.9.0]])
help([[Target : x86_64]])
help()
help([[The Hardware Locality (hwloc) software project. The Portable Hardware
Locality (hwloc) software package provides a portable abstraction
(across OS, versions, architectures, ...) of the hierarchical topology
of modern architectures, including NUMA memory nodes, sockets, shared
caches, cores and simultaneous multithreading. It also gathers various
system attributes such as cache and memory information as well as the
locality of I/O devices such as network interfaces, InfiniBand HCAs or
GPUs. It primarily aims at helping applications with gathering
information about modern computing hardware so as to exploit it
accordingly and efficiently.]])



prepend_path("MANPATH", "/usr/share/man", ":")
prepend_path("ACLOCAL_PATH", "/usr/share/aclocal", ":")
prepend_path("PKG_CONFIG_PATH", "/usr/lib/pkgconfig", ":")
prepend_path("PKG_CONFIG_PATH", "/usr/share/pkgconfig", ":")
append_path("MANPATH", "", ":")

