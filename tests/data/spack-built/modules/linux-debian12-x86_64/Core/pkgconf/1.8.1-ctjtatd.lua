-- -*- lua -*-
-- Module file created by spack (https://github.com/spack/spack) on 2026-11-27 20:01:34.824971
--
-- pkgconf@1.8.1 build_system=autotools platform=linux os=debian12 target=x86_64/ctjtatd
--

whatis([[Name : pkgconf]])
whatis([[Version : 1.8.1]])
whatis([[Target : x86_64]])
whatis([[Short description : pkgconf is a program which helps to configure compiler and linker flags for development frameworks. It is similar to pkg-config from freedesktop.org, providing additional functionality while also maintaining compatibility.]])
whatis([[Configure options : unknown, software installed outside of Spack]])

help([[Name   : pkgconf]])
help([[Version: 1.8.1]])
help([[Target : x86_64]])
help()
help([[pkgconf is a program which helps to configure compiler and linker flags
for development frameworks. It is similar to pkg-config from
freedesktop.org, providing additional functionality while also
maintaining compatibility.]])



prepend_path("MANPATH", "/usr/share/man", ":")
prepend_path("ACLOCAL_PATH", "/usr/share/aclocal", ":")
prepend_path("PKG_CONFIG_PATH", "/usr/lib/pkgconfig", ":")
prepend_path("PKG_CONFIG_PATH", "/usr/share/pkgconfig", ":")
append_path("MANPATH", "", ":")

