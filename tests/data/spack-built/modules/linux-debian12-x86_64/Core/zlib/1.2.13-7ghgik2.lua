-- -*- lua -*-
-- Module file created by spack (https://github.com/spack/spack) on 2026-11-27 20:01:35.020839
--
-- zlib@1.2.13+optimize+pic+shared build_system=makefile platform=linux os=debian12 target=x86_64/7ghgik2
--

whatis([[Name : zlib]])
whatis([[Version : 1.2.13]])
whatis([[Target : x86_64]])
whatis([[Short description : A free, general-purpose, legally unencumbered lossless data-compression library. ]])
whatis([[Configure options : unknown, software installed outside of Spack]])

help([[Name   : zlib]])
help([[Version: 1.2.13]])
help([[Target : x86_64]])
help()
help([[A free, general-purpose, legally unencumbered lossless data-compression
library.]])



prepend_path("MANPATH", "/usr/share/man", ":")
prepend_path("ACLOCAL_PATH", "/usr/share/aclocal", ":")
prepend_path("PKG_CONFIG_PATH", "/usr/lib/pkgconfig", ":")
prepend_path("PKG_CONFIG_PATH", "/usr/share/pkgconfig", ":")
append_path("MANPATH", "", ":")

