-- -*- lua -*-
-- Module file created by spack (https://github.com/spack/spack) on 2026-11-27 20:01:34.178754
--
-- libxml2@2.9.14~http+pic~python+shared build_system=autotools platform=linux os=debian12 target=x86_64/oiyj3no
--

whatis([[Name : libxml2]])
whatis([[Version : 2.9.14]])
whatis([[Target : x86_64]])
whatis([[Short description : Libxml2 is the XML C parser and toolkit developed for the Gnome project (but usable outside of the Gnome platform), it is free software available under the MIT License.]])
whatis([[Configure options : unknown, software installed outside of Spack]])

help([[Name   : libxml2]])
help([[Version: 2.9.14]])
help([[Target : x86_64]])
help()
help([[Libxml2 is the XML C parser and toolkit developed for the Gnome project
(but usable outside of the Gnome platform), it is free software
available under the MIT License.]])



prepend_path("MANPATH", "/usr/share/man", ":")
prepend_path("ACLOCAL_PATH", "/usr/share/aclocal", ":")
prepend_path("PKG_CONFIG_PATH", "/usr/lib/pkgconfig", ":")
prepend_path("PKG_CONFIG_PATH", "/usr/share/pkgconfig", ":")
append_path("MANPATH", "", ":")

