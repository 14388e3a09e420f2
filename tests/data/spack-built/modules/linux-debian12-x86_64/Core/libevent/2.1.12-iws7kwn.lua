-- -*- lua -*-
-- Module file created by spack (https://github.com/spack/spack) on 2026-11-27 20:01:34.130345
--
-- libevent@2.1.12+openssl build_system=autotools platform=linux os=debian12 target=x86_64/iws7kwn
--

whatis([[Name : libevent]])
whatis([[Version : 2.1.12]])
whatis([[Target : x86_64]])
whatis([[Short description : The libevent API provides a mechanism to execute a callback function when a specific event occurs on a file descriptor or after a timeout has been reached. Furthermore, libevent also support callbacks due to signals or regular timeouts.]])
whatis([[Configure options : unknown, software installed outside of Spack]])

help([[Name   : libevent]])
help([[Version: 2.1.12]])
help([[Target : x86_64]])
help()
help([[The libevent API provides a mechanism to execute a callback function
when a specific event occurs on a file descriptor or after a timeout has
been reached. Furthermore, libevent also support callbacks due to
signals or regular timeouts.]])



prepend_path("MANPATH", "/usr/share/man", ":")
prepend_path("ACLOCAL_PATH", "/usr/share/aclocal", ":")
prepend_path("PKG_CONFIG_PATH", "/usr/lib/pkgconfig", ":")
prepend_path("PKG_CONFIG_PATH", "/usr/share/pkgconfig", ":")
append_path("MANPATH", "", ":")

